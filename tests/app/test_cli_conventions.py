"""The conventions of a command line a user expects: ``fingrav --version`` and ``fingrav help COMMAND``."""

from __future__ import annotations

import subprocess
import sys

import pytest

from fingrav_native.app import _cli as cli


def _main(argv: list[str]) -> int:
    try:
        return cli.main(argv)
    except SystemExit as exc:  # argparse's --help, --version and refusals exit
        return int(exc.code or 0)


def test_unclear_version_prints_the_package_version_without_loading_the_analysis() -> None:
    # `fingrav --version` did not exist; it must stay cheap: no numpy, scipy or matplotlib.
    code = ("import sys\nfrom fingrav_native.app._cli import main\nfrom fingrav_native._version import __version__\n"
            "try:\n    main(['--version'])\nexcept SystemExit as e:\n    assert not e.code, e.code\n"
            "heavy = [m for m in ('numpy', 'scipy', 'matplotlib') if m in sys.modules]\n"
            "assert not heavy, heavy\nprint('version', __version__, file=sys.stderr)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    version = proc.stderr.strip().splitlines()[-1].split()[-1]
    assert proc.stdout.strip() == f"fingrav {version}"


@pytest.mark.parametrize("command", ["demo", "devices", "plot", "export", "profile", "sync", "characterize", "trace",
                                     "record", "run"])
def test_unclear_help_command_prints_what_command_help_prints(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert _main([command, "--help"]) == 0
    direct = capsys.readouterr().out
    assert _main(["help", command]) == 0
    assert capsys.readouterr().out == direct and direct.startswith(f"usage: fingrav {command}")


def test_unclear_help_alone_prints_the_main_help_and_an_unknown_command_is_refused(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert _main(["help"]) == 0
    assert capsys.readouterr().out.startswith("usage: fingrav [-h] [--version] COMMAND")
    assert _main(["help", "nosuch"]) == cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert "invalid choice: 'nosuch'" in err and "Traceback" not in err
