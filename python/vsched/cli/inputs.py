"""What the user passes, checked before anything runs: input files, output directories, and
sizes such as `--max-memory 8G`. A mistake raises `CliError`, naming the argument.
"""

import re
from pathlib import Path
from typing import Optional

from vsched.cli.errors import CliError, describe_os_error


def make_directory(option: str, path: Path) -> None:
    """Create the output directory `path` (and its parents), or fail naming `option`."""
    if path.exists() and not path.is_dir():
        raise CliError(f"{option}: '{path}' exists and is not a directory")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise CliError(f"{option}: {describe_os_error(error)}") from None


def check_input_file(label: str, path: Path) -> None:
    """Fail early, naming the argument, when an input file is missing or is a directory."""
    if not path.exists():
        raise CliError(f"{label}: no such file '{path}'")
    if path.is_dir():
        raise CliError(f"{label}: '{path}' is a directory, not a file")


_SIZE = re.compile(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*([a-z]*)\s*", re.IGNORECASE)
_SIZE_UNITS: dict[str, int] = {
    "": 1,
    "b": 1,
    **{f"{p}{suffix}": 1024 ** (i + 1) for i, p in enumerate("kmgt") for suffix in ("", "ib")},
    **{f"{p}b": 1000 ** (i + 1) for i, p in enumerate("kmgt")},
}
U64_MAX = 2**64 - 1


def parse_size(text: str, option: str = "--max-memory") -> int:
    """A size in bytes: a number of bytes, or a number with a unit. K, M, G, T and KiB, MiB,
    GiB, TiB are powers of 1024; KB, MB, GB, TB powers of 1000 (case does not matter):
    `8G`, `512M`, `1.5GiB`, `4000000000`."""
    match = _SIZE.fullmatch(text)
    unit: str = match.group(2).lower() if match else ""
    if match is None or unit not in _SIZE_UNITS:
        raise CliError(
            f"{option}: expected a size such as 8G, 512M, 1.5GiB or a number of bytes, got '{text}'"
        )
    number: str = match.group(1)
    if "." in number:
        # Exact for decimal fractions: 1.5G is 1610612736 bytes, not a float's approximation.
        whole, _, fraction = number.partition(".")
        scale: int = 10 ** len(fraction)
        size = (int(whole or "0") * scale + int(fraction or "0")) * _SIZE_UNITS[unit] // scale
    else:
        size = int(number) * _SIZE_UNITS[unit]
    if not 1 <= size <= U64_MAX:
        raise CliError(f"{option}: expected a size from 1 byte to {U64_MAX} bytes, got '{text}'")
    return size


def max_memory_bytes(text: Optional[str]) -> int:
    """The core's `max_memory` of a `--max-memory` option: 0 (its default budget) when absent."""
    return 0 if text is None else parse_size(text)
