"""Path safety inside a workspace's files root."""

import os

import pytest

from conversations.files import UnsafePath, list_folder, resolve_inside, walk_files


@pytest.mark.parametrize(
    "path, reason",
    [
        ("../secret", "'..'"),
        ("notes/../../x", "'..'"),
        ("/etc/passwd", "relative"),
        ("\\windows", "relative"),
        ("C:/Windows", "relative"),
        ("notes/\x00.md", "NUL"),
        ("a" * 256, "longer than 255"),
        ("a/" * 600, "longer than 1024"),
        ("escape/passwd", "outside"),
        ("escape", "outside"),
    ],
)
def test_paths_that_leave_the_root_or_are_malformed_are_refused(files_root, path, reason):
    os.symlink("/etc", files_root / "escape")
    with pytest.raises(UnsafePath) as refused:
        resolve_inside(files_root, path)
    assert reason in str(refused.value)


def test_paths_inside_resolve_even_through_inner_links(files_root):
    os.symlink(files_root / "notes", files_root / "shortcut")
    assert (
        resolve_inside(files_root, "shortcut/ideas.md") == (files_root / "notes/ideas.md").resolve()
    )
    assert resolve_inside(files_root, "./notes//ideas.md").name == "ideas.md"
    assert resolve_inside(files_root, "") == files_root.resolve()


def test_listing_puts_folders_first_and_hides_links_that_leave(files_root):
    os.symlink("/etc", files_root / "escape")
    (files_root / ".hidden").write_text("x")
    entries = list_folder(files_root, "")
    assert [(e.name, e.kind) for e in entries] == [
        ("data", "folder"),
        ("docs", "folder"),
        ("notes", "folder"),
        ("reports", "folder"),
        ("README.md", "file"),
    ]
    assert [e.path for e in list_folder(files_root, "notes")] == [
        "notes/ideas.md",
        "notes/meeting-2026-11-02.md",
    ]
    with pytest.raises(NotADirectoryError):
        list_folder(files_root, "README.md")
    with pytest.raises(FileNotFoundError):
        list_folder(files_root, "nowhere")


def test_walking_skips_links_that_leave_the_root(files_root):
    os.symlink("/etc/hostname", files_root / "notes" / "host")
    walked = {p.name for p in walk_files(files_root)}
    assert "host" not in walked and "ideas.md" in walked and len(walked) == 8
