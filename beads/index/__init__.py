"""The index: the sqlite copy of HEAD's beads that reads go through, its event ids, and
its rebuild."""
