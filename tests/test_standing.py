"""harness.records.standing: where things stand, made once for the results pages and the README; the
committed page and README block are what the command makes from docs/results/*.jsonl."""
import re
import shutil
from pathlib import Path

from harness.records import reader, results, standing
from tests.test_results import H200, case, results_file

ROOT = Path(__file__).resolve().parent.parent
BIG = (32768, 4096)          # 512 MiB at 4 bytes an element: counted
SMALL = (16, 4096)           # not counted


def test_the_rule_counts_large_cases_takes_the_best_passing_kernels_and_the_median():
    records = [
        case("triton", BIG, 4200.0), case("cuda", BIG, 4000.0), case("eager", BIG, 2100.0, role="peer"),
        case("liger", BIG, 4300.0, role="peer", status="fail"),      # a failed peer is no peer
        case("triton", BIG, 4000.0, dtype="float32"), case("cuda", BIG, 4100.0, dtype="float32"),
        case("eager", BIG, 4100.0, dtype="float32", role="peer"),
        case("triton", (16384, 8192), 3000.0, dtype="float16"),    # no peer passed: no ratio
        case("cuda", BIG, 9000.0, dtype="float16", negative_control=True),
        case("triton", SMALL, 10.0), case("eager", SMALL, 100.0, role="peer")]   # below 256 MiB
    [s] = standing.standings(records)
    assert (s.op, s.cases, dict(s.best)) == ("rmsnorm", 3, {"triton": 2, "cuda": 1})
    assert sorted(s.ratios) == [1.0, 2.0]
    table = standing.readme_table({"NVIDIA H200": records})
    assert table[2] == "| rmsnorm | triton (2 of 3) | 96.5 | 1.500 |"   # 4100/4250 = 96.47, the median of 3


def test_the_readme_table_has_a_column_group_per_gpu_page(tmp_path):
    h100 = {**H200, "gpu_name": "NVIDIA H100 80GB HBM3", "gpu_uuid": "GPU-h"}
    f = results_file(tmp_path / "a.jsonl", [
        case("triton", BIG, 4200.0), case("eager", BIG, 2100.0, role="peer"),
        case("cuda", BIG, 3000.0, gpu=h100, roof=3000.0), case("eager", BIG, 3000.0, gpu=h100, role="peer")])
    out = tmp_path / "results"
    assert results.main([str(f), "--dir", str(out)]) == 0
    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n\n{standing.BEGIN}\nold\n{standing.END}\nafter\n")
    assert results.main(["--dir", str(out), "--readme", str(readme)]) == 0
    text = readme.read_text()
    assert ("| op | best of ours, H100 80GB HBM3 | % of roof | ours / best peer | best of ours, H200 | % of roof "
            "| ours / best peer |") in text
    assert "| rmsnorm | cuda | 100.0 | 1.000 | triton | 98.8 | 2.000 |" in text
    assert text.endswith(f"{standing.END}\nafter\n") and "old" not in text


def test_a_readme_without_the_markers_is_refused_by_name(tmp_path, capsys):
    readme = tmp_path / "README.md"
    readme.write_text("# x\n")
    shutil.copy(ROOT / "docs" / "results" / "h200.jsonl", tmp_path / "h200.jsonl")
    assert results.main(["--dir", str(tmp_path), "--readme", str(readme)]) == 2
    assert "has no generated block" in capsys.readouterr().err


def test_the_committed_pages_are_what_harness_results_makes_of_their_jsonl():
    """Every docs/results/<gpu>.md, as `harness-results` (no files) makes it again."""
    pages = sorted((ROOT / "docs" / "results").glob("*.jsonl"))
    assert pages
    for data in pages:
        records, rows = reader.read(data, cut_ok=False)
        [gpu] = {reader.gpu_model(r) for r in records}
        made = results.page(gpu, records, data.name, reader.latest_first_runs(reader.first_runs(rows)))
        assert data.with_suffix(".md").read_text() == made, f"{data.with_suffix('.md')}: run harness-results"
        assert made.split("\n## ")[1].startswith("Where things stand\n")


def test_the_readme_block_is_what_harness_results_makes_of_docs_results(tmp_path):
    readme, pages = tmp_path / "README.md", tmp_path / "results"
    shutil.copy(ROOT / "README.md", readme)
    assert results.main(["--dir", str(pages), "--readme", str(readme)]) == 2   # no pages: refused
    pages.mkdir()
    for data in (ROOT / "docs" / "results").glob("*.jsonl"):
        shutil.copy(data, pages / data.name)
    assert results.main(["--dir", str(pages), "--readme", str(readme)]) == 0
    assert readme.read_text() == (ROOT / "README.md").read_text(), "run harness-results --readme README.md"


def test_the_readme_is_short_and_shows_the_results_table_early():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 200
    assert lines.index(standing.BEGIN) < 58 and lines[lines.index(standing.BEGIN) + 1].startswith("| op |")
    text = "\n".join(lines)
    for command in ("scripts/harness op=rmsnorm impl=all", "scripts/test"):   # the two commands, word for word
        assert re.search(rf"^{re.escape(command)}\s", text, re.M), command
