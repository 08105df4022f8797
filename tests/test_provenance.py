"""harness.measure.provenance: the source tree a run ran, named even when the checkout is dirty."""
import subprocess

from harness.measure import provenance


def git(repo, *args):
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=repo, check=True,
                          capture_output=True, text=True).stdout.strip()


def test_the_source_tree_is_the_commit_s_tree_for_the_same_files_and_leaves_the_index_alone(tmp_path, monkeypatch):
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / ".gitignore").write_text("ignored/\n")
    (repo / "kernel.cu").write_text("// v1\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "v1")
    monkeypatch.setattr(provenance, "REPO", repo)
    monkeypatch.delenv("HARNESS_GIT_TREE", raising=False)
    v1 = git(repo, "rev-parse", "HEAD^{tree}")
    (repo / "ignored").mkdir()
    (repo / "ignored" / "cache.bin").write_text("not source")
    assert provenance.source_tree() == v1                  # ignored files are not sources

    (repo / "kernel.cu").write_text("// v2\n")             # a copy of a newer tree on an old HEAD
    (repo / "new.cuh").write_text("// new header\n")
    dirty = provenance.source_tree()
    assert dirty != v1
    assert git(repo, "status", "--porcelain") == "M kernel.cu\n?? new.cuh"   # the index untouched
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "v2")
    assert dirty == git(repo, "rev-parse", "HEAD^{tree}")


def test_a_checkout_without_git_names_no_tree(tmp_path, monkeypatch):
    monkeypatch.setattr(provenance, "REPO", tmp_path)
    monkeypatch.delenv("HARNESS_GIT_TREE", raising=False)
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))
    assert provenance.source_tree() is None


def test_a_record_names_the_versions_of_the_packages_each_framework_declares(monkeypatch):
    """The package list was the harness's own, naming every framework's; now each framework
    declares its packages (Framework.packages), a plugin's too."""
    from types import SimpleNamespace

    from harness import registry
    monkeypatch.setattr(registry, "frameworks", lambda: {"plugin": SimpleNamespace(packages=("pytest",))})
    versions = provenance._versions()
    assert "pytest" in versions and "torch" in versions
    assert "triton" not in versions   # no framework here declares it
