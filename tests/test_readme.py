"""The README is a front page: at most 200 lines, the two quickstart commands, one figure, a click to each path."""

from __future__ import annotations

import re

from test_docs import README, ROOT, broken_links


def _test_command() -> str:
    """The test command .ci/run runs verbatim (its stage 1), as .ci/run has it."""
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    lines = ci.split("# Verbatim from README.md.", 1)[1].split("\n")
    return next(ln for ln in lines if ln.startswith("python3 -m venv")).split(" || ")[0]


def test_unclear_the_readme_is_a_front_page_with_the_two_quickstart_commands() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 200
    assert "python3 -m venv .venv && .venv/bin/pip install . && .venv/bin/fingrav demo" in text
    assert _test_command() in text, "the test command .ci/run runs verbatim is not in the README"
    images = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text)
    assert len(images) == 1 and (ROOT / images[0]).is_file(), images


def test_unclear_each_user_reaches_their_path_from_the_front_page_in_one_click() -> None:
    links = set(re.findall(r"\]\((docs/[^)#\s]+)", README.read_text(encoding="utf-8")))
    for page in ("docs/tutorials/first-profile.md", "docs/howto/profile-your-kernel.md",  # a kernel
                 "docs/tutorials/first-insitu.md", "docs/howto/native-capture.md",  # a running application
                 "docs/howto/torch-profiler.md", "docs/howto/rocprofv3.md",
                 "docs/howto/building-blocks.md",  # the building blocks
                 "docs/reference/exit-codes.md", "docs/explanation/guarantees.md", "docs/index.md"):
        assert page in links, f"the README does not link {page}"


def test_unclear_every_relative_link_of_the_readme_leads_somewhere() -> None:
    assert not broken_links(README)
