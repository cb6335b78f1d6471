//! Integration tests of the memory index.
