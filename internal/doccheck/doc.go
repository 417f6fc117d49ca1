// Package doccheck holds no code: its tests keep the repository's
// documentation in step with the code. They check that README.md stays
// short and that its Go program builds and vets against this module, that
// the relative links of the Markdown files resolve, and that ARCHITECTURE.md
// names every Go file of the mapped packages and no file that does not
// exist.
package doccheck
