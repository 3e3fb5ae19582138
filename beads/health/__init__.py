"""`gc doctor`: the checks of a store against HEAD, what they find, and the repairs."""
