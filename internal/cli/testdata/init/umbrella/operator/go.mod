module example.com/platform/operator

go 1.24.0
