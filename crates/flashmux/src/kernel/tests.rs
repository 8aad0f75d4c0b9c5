//! The page cache's tests.
