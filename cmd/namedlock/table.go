package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/namedlock/mysql/namedlock/holders"
)

// maxRunning is how much of a holder's statement the table shows.
const maxRunning = 60

// printHolders prints hs as a table; withKey adds the key column (holders,
// where keys were asked for; list knows only server names).
func printHolders(w io.Writer, hs []holders.Holder, withKey bool) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	head := "NAME\tHELD\tCONNECTION\tUSER\tHOST\tCOMMAND\tSTATE\tTIME\tRUNNING"
	if withKey {
		head = "KEY\t" + head
	}
	fmt.Fprintln(tw, head)
	for _, h := range hs {
		cols := []string{h.Name, "no", "-", "-", "-", "-", "-", "-", "-"}
		if withKey {
			cols = append([]string{h.Key}, cols...)
		}
		c := cols[len(cols)-8:] // from HELD on
		if h.Held {
			c[0] = "yes"
			if h.ConnectionID != 0 {
				c[1] = strconv.FormatInt(h.ConnectionID, 10)
			} else {
				c[1] = "unknown"
			}
		}
		if s := h.Session; s != nil {
			c[2], c[3], c[4], c[5] = orDash(s.User), orDash(s.Host), orDash(s.Command), orDash(s.State)
			c[6] = s.Time.Round(100 * time.Millisecond).String()
			c[7] = orDash(oneLine(s.Info, maxRunning))
		}
		fmt.Fprintln(tw, strings.Join(cols, "\t"))
	}
	_ = tw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// oneLine collapses s's whitespace and cuts it to at most n characters.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}
