"""``from pinakes_core import …`` keeps every public name, loaded on first use (issue 37)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

import pinakes_core


def test_every_public_name_resolves_to_its_defining_module() -> None:
    from pinakes_core.errors import PinakesError
    from pinakes_core.kb import KB
    from pinakes_core.models import Hit

    assert pinakes_core.KB is KB and pinakes_core.Hit is Hit
    assert pinakes_core.PinakesError is PinakesError
    for name in pinakes_core.__all__:
        assert getattr(pinakes_core, name) is not None, name
    assert set(pinakes_core.__all__) <= set(dir(pinakes_core))
    assert pinakes_core.__version__[0].isdigit()


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="NoSuchName"):
        pinakes_core.NoSuchName  # noqa: B018


def test_importing_the_package_or_its_errors_loads_no_engine() -> None:
    probe = textwrap.dedent(
        """
        import sys
        import pinakes_core
        from pinakes_core.errors import PinakesError
        heavy = {"numpy", "pydantic", "pinakes_core.kb", "pinakes_core.models"} & set(sys.modules)
        assert not heavy, sorted(heavy)
        from pinakes_core import *  # every name in __all__, loaded now
        assert KB.__module__ == "pinakes_core.kb" and "numpy" in sys.modules
        print("OK")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "OK"
