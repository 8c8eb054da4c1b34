// Command validator is the image the sample service runs pods of: it
// checks nothing and says so.
package main

import "fmt"

func main() { fmt.Println("validator: ok") }
