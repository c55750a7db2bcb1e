"""Files gradgen writes: ordinary permissions, symlinks followed, nothing left behind by a killed save."""
from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from gradgen.framework import Scope
from gradgen.framework.io import load_params, save_params
from gradgen.program import Program, layers, program_guard
from gradgen.program.files import temp_files_of, write_atomically


def _small_model():
    main = Program()
    with program_guard(main, Program()):
        layers.create_parameter([3, 2], "float64", name="w")
    scope = Scope()
    scope.set("w", np.arange(6.0).reshape(3, 2))
    return main, scope


@pytest.fixture
def umask():
    def set_to(value):
        previous = os.umask(value)
        restore.append(previous)

    restore = []
    yield set_to
    if restore:
        os.umask(restore[0])


@pytest.mark.parametrize("mask,mode", [(0o022, 0o644), (0o002, 0o664), (0o077, 0o600)])
def test_new_files_respect_the_umask(tmp_path, umask, mask, mode):
    umask(mask)
    main, scope = _small_model()
    main.save(tmp_path / "main.json")
    save_params(tmp_path / "p.npz", main, scope)
    assert oct(os.stat(tmp_path / "main.json").st_mode & 0o777) == oct(mode)
    assert oct(os.stat(tmp_path / "p.npz").st_mode & 0o777) == oct(mode)


def test_replacing_a_file_keeps_its_permissions(tmp_path, umask):
    umask(0o022)
    path = tmp_path / "main.json"
    path.write_text("old")
    os.chmod(path, 0o640)
    write_atomically(path, b"new")
    assert path.read_bytes() == b"new"
    assert oct(os.stat(path).st_mode & 0o777) == oct(0o640)


def test_saving_through_a_symlink_writes_its_target(tmp_path):
    main, scope = _small_model()
    real = tmp_path / "store" / "params.npz"
    real.parent.mkdir()
    real.write_bytes(b"placeholder")
    link = tmp_path / "params.npz"
    link.symlink_to(real)
    save_params(link, main, scope)
    assert link.is_symlink() and os.readlink(link) == str(real)
    other = Scope()
    load_params(real, main, other)
    np.testing.assert_array_equal(other["w"], scope["w"])
    assert sorted(p.name for p in real.parent.iterdir()) == ["params.npz"]


def test_a_dangling_symlink_gets_its_target_created(tmp_path):
    link = tmp_path / "main.json"
    link.symlink_to(tmp_path / "real.json")
    Program().save(link)
    assert link.is_symlink() and (tmp_path / "real.json").is_file()
    Program.load(link)


_SAVER = textwrap.dedent("""
    import sys
    import numpy as np
    from gradgen.framework import Scope
    from gradgen.framework.io import save_params
    from gradgen.program import Program

    main = Program()
    main.global_block().create_var("w", [2_000_000], "float64", persistable=True)
    scope = Scope()
    step = 0
    print("ready", flush=True)
    while True:
        step += 1
        scope.set("w", np.full(2_000_000, float(step)))
        save_params(sys.argv[1], main, scope)
""")


def test_saves_killed_outright_leave_no_temp_files_after_the_next_save(tmp_path):
    """SIGKILL cannot be caught: the next save to the same file removes what a killed save left."""
    path = tmp_path / "p.npz"
    main = Program()
    main.global_block().create_var("w", [2_000_000], "float64", persistable=True)
    rng = random.Random(0)
    for _ in range(6):
        saver = subprocess.Popen([sys.executable, "-c", _SAVER, str(path)], stdout=subprocess.PIPE)
        assert saver.stdout.readline().strip() == b"ready"
        time.sleep(rng.uniform(0.05, 0.4))
        saver.send_signal(signal.SIGKILL)
        saver.wait()
        saver.stdout.close()
        if path.exists():  # whatever was interrupted, the file is a whole old or new save
            scope = Scope()
            load_params(path, main, scope)
            assert len(set(scope["w"].tolist())) == 1
    scope = Scope()
    scope.set("w", np.zeros(2_000_000))
    save_params(path, main, scope)
    assert temp_files_of(path) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.npz"]


def test_a_temp_file_of_a_running_process_is_left_alone(tmp_path):
    path = tmp_path / "main.json"
    alive = tmp_path / f".main.json.gradgen-tmp-{os.getppid()}-abc"  # our parent process is alive
    dead = tmp_path / ".main.json.gradgen-tmp-999999999-abc"         # beyond the largest pid Linux allows
    alive.write_bytes(b"partial")
    dead.write_bytes(b"partial")
    Program().save(path)
    assert alive.exists() and not dead.exists()
