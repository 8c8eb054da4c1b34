// Command web is devloop's sample service: it answers on :8080 and, like an
// operator under development that runs pods of its own image (GPU
// Operator's validator), starts one validator pod from the image named in
// VALIDATOR_IMAGE — the revision tag devloop pushed and the chart passed in.
package main

import (
	"fmt"
	"log"
	"net/http"
	"os"
	"time"
)

// greeting is what / answers; the end-to-end tests change it and watch the
// new pod answer.
const greeting = "hello from devloop"

func main() {
	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprintln(w, greeting)
	})
	http.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	if image := os.Getenv("VALIDATOR_IMAGE"); image != "" {
		go func() {
			for {
				err := spawnValidator(image)
				if err == nil {
					return
				}
				log.Printf("starting the validator pod: %v", err)
				time.Sleep(2 * time.Second)
			}
		}()
	}
	log.Printf("listening on :8080 (%s)", greeting)
	log.Fatal(http.ListenAndServe(":8080", nil))
}
