// Package docs holds the operator and contributor documentation, one topic
// per Markdown file, and the test that keeps README.md and those files
// honest: every relative link reaches a file, every #anchor a heading, and
// the README's set-up commands name the scripts that really do the set-up.
// It has no Go code of its own.
package docs
