"""bitext_hf.data.offline_models: all-MiniLM-L6-v2 from its PyPI package, with a fake package of the same layout."""

from __future__ import annotations

import importlib
import json
import zipfile

import pytest

from bitext_hf.data.offline_models import minilm_folder


def fake_package(root, members: dict[str, str], links: tuple[str, ...] = ()) -> None:
    package = root / "all_minilm_l6_v2"
    package.mkdir()
    (package / "__init__.py").write_text("print('the real package prints on import')\n")
    with zipfile.ZipFile(package / "model.zip", "w") as archive:
        for name, text in members.items():
            archive.writestr(name, text)
        for name in links:
            info = zipfile.ZipInfo(name)
            info.external_attr = (0o120777) << 16  # a symbolic link, as `zip --symlinks` stores it
            archive.writestr(info, "/etc/passwd")


@pytest.fixture
def installed(tmp_path, monkeypatch):
    def install(members, links=()):
        site = tmp_path / "site"
        site.mkdir()
        fake_package(site, members, links)
        monkeypatch.syspath_prepend(str(site))
        importlib.invalidate_caches()

    return install


def test_not_installed_gives_none(tmp_path, monkeypatch):
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    assert minilm_folder(tmp_path) is None
    assert list(tmp_path.iterdir()) == []


def test_unpacks_once_and_reuses(tmp_path, installed, capsys):
    installed({"config.json": json.dumps({"model_type": "bert"}), "tokenizer.json": "{}"})
    folder = minilm_folder(tmp_path / "work", "base")
    assert folder == tmp_path / "work" / "base"
    assert json.loads((folder / "config.json").read_text()) == {"model_type": "bert"}
    assert "prints" not in capsys.readouterr().out  # located, not imported
    (folder / "tokenizer.json").write_text("kept")
    assert minilm_folder(tmp_path / "work", "base") == folder
    assert (folder / "tokenizer.json").read_text() == "kept"  # a second call reuses the folder


@pytest.mark.parametrize("bad", ["../outside.json", "/abs.json"])
def test_member_leaving_the_folder_is_refused_before_writing(tmp_path, installed, bad):
    installed({"config.json": "{}", bad: "{}"})
    with pytest.raises(ValueError, match="would leave"):
        minilm_folder(tmp_path / "work")
    assert not (tmp_path / "work").exists()
    assert not (tmp_path / "outside.json").exists()


def test_link_member_is_refused(tmp_path, installed):
    installed({"config.json": "{}"}, links=("vocab.txt",))
    with pytest.raises(ValueError, match=r"vocab\.txt"):
        minilm_folder(tmp_path / "work")
    assert not (tmp_path / "work").exists()


def test_an_existing_folder_without_a_model_is_refused_not_overwritten(tmp_path, installed):
    installed({"config.json": "{}"})
    folder = tmp_path / "work" / "all-MiniLM-L6-v2"
    folder.mkdir(parents=True)
    (folder / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match=r"no config\.json"):
        minilm_folder(tmp_path / "work")
    assert (folder / "notes.txt").read_text() == "mine" and not (folder / "config.json").exists()


def test_an_interrupted_unpack_is_not_taken_for_the_model(tmp_path, installed):
    installed({"config.json": "{}", "tokenizer.json": "{}"})
    (tmp_path / "work" / "all-MiniLM-L6-v2.part").mkdir(parents=True)  # left by a killed run
    (tmp_path / "work" / "all-MiniLM-L6-v2.part" / "stale.bin").write_text("half")
    folder = minilm_folder(tmp_path / "work")
    assert sorted(p.name for p in folder.iterdir()) == ["config.json", "tokenizer.json"]
    assert sorted(p.name for p in (tmp_path / "work").iterdir()) == ["all-MiniLM-L6-v2"]
