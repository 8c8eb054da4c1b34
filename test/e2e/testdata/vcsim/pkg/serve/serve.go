// Package serve answers GET / with the binary's name and version on :8080
// (or $PORT): what a test reads through the component's Service to see
// which code is running.
package serve

import (
	"fmt"
	"log"
	"net/http"
	"os"
	"time"
)

// Run serves until the process ends.
func Run(name, version string) {
	port := os.Getenv("PORT")
	if port == "" {
		port = "8080"
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, "%s %s\n", name, version)
	})
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	log.Printf("%s %s serving on :%s", name, version, port)
	srv := &http.Server{Addr: ":" + port, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	log.Fatal(srv.ListenAndServe())
}
