"""Credentials kept out of everything hpcprobe records or prints: a URL's password
(`postgresql://user:PASSWORD@host/db`) and the value of a variable whose name says it holds a
secret (`PGPASSWORD`, `API_TOKEN`, `HPCPROBE_SECRET_KEY`). Masked, not dropped: the record
still says that the variable was set."""

from __future__ import annotations

import re

#: What a masked secret reads as
MASK = "***"
#: Variable names that hold a secret whatever their value looks like
SECRET_NAME = re.compile(r"PASSW(OR)?D|SECRET|TOKEN|CREDENTIAL|(^|_)(API_?)?KEY$|PASSPHRASE",
                         re.IGNORECASE)
#: A URL's user-information with a password: scheme://user:password@
_URL_PASSWORD = re.compile(r"(\b[a-zA-Z][a-zA-Z0-9+.-]*://[^:/@\s]*):[^@/\s]*@")


def redact(text: str) -> str:
    """The text with every URL's password masked."""
    return _URL_PASSWORD.sub(rf"\1:{MASK}@", text)


def variable(name: str, value: str) -> str:
    """An environment variable's value as it may be recorded: masked whole where its name says
    it is a secret, else with URL passwords masked."""
    return MASK if SECRET_NAME.search(name) else redact(value)
