// Command hello is the tiny static binary the image tests package.
package main

import "fmt"

func main() { fmt.Println("hello") }
