module example.com/widget-operator

go 1.25.3
