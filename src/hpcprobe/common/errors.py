"""Exceptions that the CLI turns into one line and a stable exit code."""

from __future__ import annotations

import re
from collections.abc import Mapping

#: Exit codes, documented in the README.
EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_UNJUDGED = 3  # nothing could be judged: no reference for it, or none of its figures
EXIT_INTERRUPTED = 130  # Ctrl-C or SIGTERM, as a shell reports SIGINT
#: How the one line of an error starts (a sweep reads its children's)
ERROR_PREFIX = "hpcprobe: error: "


#: An option named in a message: <field> (its options dataclass field or argparse dest).
_OPTION = re.compile(r"<(\w+)>")


class HpcprobeError(Exception):
    """A failure explained to the user in one line; `exit_code` says how the CLI ends. Below
    the command layer a message names an option as <field>, never as a flag: the command line
    shows its flag (`render`), a sweep file its key."""

    exit_code = EXIT_FAILURE
    #: How a <name> that `names` does not know is shown: as written (0: a message may quote a
    #: program's <tag>) or as the bare name (1: an option's field)
    _unknown = 0

    def render(self, names: Mapping[str, str]) -> str:
        """The message, each option it names that `names` knows shown as `names` says."""
        text = str(self.args[0]) if self.args else ""
        return _OPTION.sub(lambda m: names.get(m.group(1), m.group(self._unknown)), text)


class UserError(HpcprobeError):
    """The user asked for something impossible or malformed (exit code 2)."""

    exit_code = EXIT_USAGE


class MeasurementError(HpcprobeError):
    """A measurement could not be made or did not validate (exit code 1)."""


class NativeError(MeasurementError):
    """The native core returned an error status."""


class OptionError(UserError):
    """A value of an option is impossible, or an option is missing: every <field> of its
    message is an option, shown as its field name where `names` does not know it (a sweep
    file's key), as `str()` does."""

    _unknown = 1

    def __str__(self) -> str:
        return self.render({})
