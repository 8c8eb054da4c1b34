package main

// crd-apply: a second binary of the operator's image, built by the same
// RUN line of its Dockerfile (Dynamo's shape).
func main() {}
