print("coffer-notify")
