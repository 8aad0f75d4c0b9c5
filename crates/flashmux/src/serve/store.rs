//! Where served data lives: a sparse in-memory store or a backing file.
