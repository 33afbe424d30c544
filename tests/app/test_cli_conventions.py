"""The conventions of a command line a user expects: ``--version``, ``help COMMAND``, every output named ``--out``."""

from __future__ import annotations

import argparse
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


def _commands() -> dict[str, argparse.ArgumentParser]:
    parser = cli.build_parser()
    return dict(next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices)


#: Options that name a file or folder and are not the command's one output, with why they keep their name.
_NOT_THE_OUTPUT = {
    ("export", "--trace"), ("export", "--parquet"), ("export", "--summary"),  # several outputs, named by kind
    ("trace", "--annotate"),  # a second output beside --out: the user's own trace written again
    ("trace", "--power"), ("profile", "--resume"),  # inputs
    ("characterize", "--logs"), ("characterize", "--load"), ("characterize", "--meter"),  # inputs
}


def test_unclear_every_command_names_its_output_out() -> None:
    # `fingrav sync` wrote its figure to --plot FILE where every other command says --out.
    odd = []
    for name, sub in _commands().items():
        for action in sub._actions:
            listed = action.help != argparse.SUPPRESS and action.option_strings and action.nargs != 0
            if listed and action.metavar in ("FILE", "DIR", "CAPTURE", "OUT") and \
                    (name, action.option_strings[0]) not in _NOT_THE_OUTPUT and action.option_strings != ["--out"]:
                odd.append(f"{name} {action.option_strings}")
    assert not odd


def test_unclear_sync_out_is_the_figure_and_the_earlier_plot_still_works_unlisted(
        capsys: pytest.CaptureFixture[str]) -> None:
    sync = _commands()["sync"]
    assert sync.parse_args(["--out", "a.png"]).plot == "a.png" == sync.parse_args(["--plot", "a.png"]).plot
    help_text = sync.format_help()
    assert "--out FILE" in help_text and "--plot" not in help_text


def test_data_loss_an_output_named_under_both_spellings_is_refused_not_half_dropped(
        tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    code = _main(["sync", "--out", str(tmp_path / "a.png"), "--plot", str(tmp_path / "b.png")])
    assert code == cli.EXIT_USAGE
    assert "the output is named twice" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []
