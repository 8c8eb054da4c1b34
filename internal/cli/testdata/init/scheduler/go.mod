module example.com/batch

go 1.26.0
