module example.com/sprocket

go 1.25
