package ccall

import "os"

func syscallGetpid() int { return os.Getpid() }
