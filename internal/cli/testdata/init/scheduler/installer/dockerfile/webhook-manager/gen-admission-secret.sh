#!/bin/bash
# Writes the webhook's serving certificate into a Secret (openssl, kubectl).
set -e
openssl req -x509 -newkey rsa:2048 -nodes -subj "/CN=$1" -keyout key.pem -out cert.pem
kubectl create secret tls "$1-cert" --cert cert.pem --key key.pem
