"""The two durable stores: the decision journal (SQLite) and the versioned model store."""
