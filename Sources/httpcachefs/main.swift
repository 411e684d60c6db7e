print("httpcachefs")
