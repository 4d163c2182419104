"""The history wing: a figure's runs over time per host, read from the store (`read`), their
change points (`changes`: PELT, Welch's test, the fleet and group rules) and the series model
(`series`); its views are views/history.py, its command commands/history.py."""
