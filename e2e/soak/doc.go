// Package soak tests the soak test (make soak; runs only with SOAK_DURATION).
package soak
