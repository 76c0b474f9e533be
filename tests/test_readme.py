"""README.md stays true: its Python examples run as doctests, and the commands
it names exist."""
import doctest
import os
import re

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _readme():
    with open(os.path.join(REPO, "README.md")) as f:
        return f.read()


def test_python_examples_in_readme():
    blocks = re.findall(r"```python\n(.*?)```", _readme(), re.S)
    assert blocks, "README has no python examples"
    parser = doctest.DocTestParser()
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    for i, block in enumerate(blocks):
        test = parser.get_doctest(block, {}, f"README block {i}", "README.md", 0)
        runner.run(test)
    res = runner.summarize(verbose=False)
    assert res.failed == 0, f"{res.failed} README example(s) failed"


def test_readme_has_the_two_commands():
    text = _readme()
    for tag in ("main-command", "test-command"):
        m = re.search(rf"<!-- {tag} -->\n```\n(.+?)\n```\n<!-- /{tag} -->", text, re.S)
        assert m, f"README lacks the {tag} block"
    assert "pyembed" in re.search(r"<!-- main-command -->\n```\n(.+?)\n```", text, re.S).group(1)
