package keyfmt_test

import (
	"fmt"

	"github.com/namedlock/mysql/keyfmt"
)

func ExamplePortable() {
	// Portable names come back unchanged.
	fmt.Println(keyfmt.Portable("product:42"))
	// Anything else is mapped to a readable prefix, '#', and a hash of the
	// original bytes, so names that MySQL would fold together stay apart.
	fmt.Println(keyfmt.Portable("Product:42"))
	fmt.Println(keyfmt.Portable("café 🔒"))
	// Output:
	// product:42
	// product:42#4kbjxyi65uadq45vjbmj
	// caf_______#4pp6an2mtcxxo7cpgopq
}

func ExampleIsPortable() {
	fmt.Println(keyfmt.IsPortable("jobs/nightly-report"))
	fmt.Println(keyfmt.IsPortable("Jobs"))
	fmt.Println(keyfmt.IsPortable(""))
	// A name Portable returned is portable: Portable returns it unchanged.
	fmt.Println(keyfmt.IsPortable(keyfmt.Portable("Jobs")))
	// Output:
	// true
	// false
	// false
	// true
}

func ExamplePortable_idempotent() {
	// A server name, as the process list shows it, names the same lock
	// when it is used as a key.
	name := keyfmt.Portable("Product:42")
	fmt.Println(name)
	fmt.Println(keyfmt.Portable(name))
	// Output:
	// product:42#4kbjxyi65uadq45vjbmj
	// product:42#4kbjxyi65uadq45vjbmj
}

func ExampleKey() {
	// Key only joins prefix, ':' and the id; it never maps.
	fmt.Println(keyfmt.Key("product", 42))
	fmt.Println(keyfmt.Key("tenant/7/invoice", "2024-03"))
	fmt.Println(keyfmt.Key("Product", 42))
	// Output:
	// product:42
	// tenant/7/invoice:2024-03
	// Product:42
}

func ExampleKey_serverName() {
	// The Locker maps each key once: the server name of a key is
	// Portable(key). A portable key is its own server name.
	for _, key := range []string{keyfmt.Key("product", 42), keyfmt.Key("Product", 42)} {
		fmt.Printf("key %s -> SELECT GET_LOCK('%s', 10)\n", key, keyfmt.Portable(key))
	}
	// Output:
	// key product:42 -> SELECT GET_LOCK('product:42', 10)
	// key Product:42 -> SELECT GET_LOCK('product:42#4kbjxyi65uadq45vjbmj', 10)
}

func ExamplePortable_empty() {
	// Portable never fails, not even on an empty name; reject empty keys
	// before calling it if they are an error for you.
	key := ""
	if key == "" {
		fmt.Println("empty key rejected")
	}
	fmt.Println(keyfmt.Portable(key))
	// Output:
	// empty key rejected
	// #4oymiquy7qobjgx36tej
}

func ExampleMaxLen() {
	name := keyfmt.Portable("orders/" + string(make([]byte, 200)))
	fmt.Println(len(name) <= keyfmt.MaxLen)
	// Output:
	// true
}

// ExamplePrefix shows the part of a key that a metric may carry as a label.
func ExamplePrefix() {
	fmt.Println(keyfmt.Prefix(keyfmt.Key("product", 42)))
	fmt.Printf("%q\n", keyfmt.Prefix("nightly-report"))
	// Output:
	// product
	// ""
}
