module example.com/gadget-controller

go 1.24.0
