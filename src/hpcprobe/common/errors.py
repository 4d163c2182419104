"""Exceptions that the CLI turns into one line and a stable exit code."""

from __future__ import annotations

import re

#: Exit codes, documented in the README.
EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_UNJUDGED = 3  # nothing could be judged: no reference for it, or none of its figures
EXIT_INTERRUPTED = 130  # Ctrl-C or SIGTERM, as a shell reports SIGINT
#: How the one line of an error starts (a sweep reads its children's)
ERROR_PREFIX = "hpcprobe: error: "


class HpcprobeError(Exception):
    """A failure explained to the user in one line; `exit_code` says how the CLI ends."""

    exit_code = EXIT_FAILURE


class UserError(HpcprobeError):
    """The user asked for something impossible or malformed (exit code 2)."""

    exit_code = EXIT_USAGE


class MeasurementError(HpcprobeError):
    """A measurement could not be made or did not validate (exit code 1)."""


class NativeError(MeasurementError):
    """The native core returned an error status."""


class OptionError(UserError):
    """A value of an option is impossible. The message names options as <field> (the options
    dataclass's field name); the CLI shows its flag (--size), a sweep file its key."""

    def render(self, names: dict[str, str]) -> str:
        return re.sub(r"<(\w+)>", lambda m: names.get(m.group(1), m.group(1)), str(self.args[0]))

    def __str__(self) -> str:
        return self.render({})
