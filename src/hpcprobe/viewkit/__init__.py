"""The view toolkit: what a family, a wing or a command declares its tables, text blocks and
figures with (`table`, `figure`), below everything that measures or judges; `views/` renders
them (terminal, HTML, Markdown)."""
