package main

import (
	"context"
	"fmt"

	"github.com/jmoiron/sqlx"
)

// tables names the demo's two tables: products(id, stock), and orders, one
// row per accepted order, so that the number of units sold can be counted
// independently of the stock column.
type tables struct {
	products, orders string
}

func tablesFor(prefix string) tables {
	return tables{products: prefix + "products", orders: prefix + "orders"}
}

// create (re)creates both tables, empty. Names are checked by
// Config.validate, so they can be spliced into the statements.
func (t tables) create(ctx context.Context, db *sqlx.DB) error {
	if err := t.drop(ctx, db); err != nil {
		return err
	}
	for _, stmt := range []string{
		"CREATE TABLE " + t.products + " (id BIGINT NOT NULL PRIMARY KEY, stock INT NOT NULL)",
		"CREATE TABLE " + t.orders + " (id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY, product_id BIGINT NOT NULL, instance INT NOT NULL)",
	} {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("create the demo tables: %w", err)
		}
	}
	return nil
}

// drop removes both tables if they exist.
func (t tables) drop(ctx context.Context, db *sqlx.DB) error {
	for _, name := range []string{t.orders, t.products} {
		if _, err := db.ExecContext(ctx, "DROP TABLE IF EXISTS "+name); err != nil {
			return fmt.Errorf("drop table %s: %w", name, err)
		}
	}
	return nil
}

// reset puts the product back to stock and forgets every order.
func (t tables) reset(ctx context.Context, db *sqlx.DB, stock int) error {
	for _, q := range []struct {
		stmt string
		args []any
	}{
		{"DELETE FROM " + t.orders, nil},
		{"DELETE FROM " + t.products, nil},
		{"INSERT INTO " + t.products + " (id, stock) VALUES (?, ?)", []any{productID, stock}},
	} {
		if _, err := db.ExecContext(ctx, q.stmt, q.args...); err != nil {
			return fmt.Errorf("reset the demo data: %w", err)
		}
	}
	return nil
}

// inspect reads the product's stock and the number of orders recorded.
func (t tables) inspect(ctx context.Context, db *sqlx.DB) (stock, orders int, err error) {
	if err := db.QueryRowxContext(ctx, "SELECT stock FROM "+t.products+" WHERE id = ?", productID).Scan(&stock); err != nil {
		return 0, 0, fmt.Errorf("read the final stock: %w", err)
	}
	if err := db.QueryRowxContext(ctx, "SELECT COUNT(*) FROM "+t.orders+" WHERE product_id = ?", productID).Scan(&orders); err != nil {
		return 0, 0, fmt.Errorf("count the orders: %w", err)
	}
	return stock, orders, nil
}
