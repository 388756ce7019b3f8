"""Per-agent TOML manifests: ordered screen rules, and the store that keeps them fresh.

Rules are data so they can follow an agent's new wording without a release. The first rule
that matches wins; ``blocked`` rules are written above ``working`` ones (an agent keeps its
"esc to interrupt" footer under an open prompt); a screen no rule matches is ``idle``, never
``blocked``, because a false "needs you" costs more than a late one.

The parts: ``_schema`` (what a file may say), ``_regions`` (the part of the screen a rule
reads), ``_regex`` (bounded-time patterns: the hazard check and RE2, on CPython's private
``re._parser``), ``_matching`` (compiled rules classifying screens), ``_store`` (loading and
hot reload).
"""

from ._matching import MEMO_SIZE, NO_MATCH, RULE_BUDGET_MS, CompiledManifest, CompiledRule, RuleTrace, Verdict
from ._regex import backtracking_hazard, compile_rule_pattern
from ._regions import HORIZONTAL_RULE, REGIONS_HELP, region_lines
from ._schema import Manifest, ManifestError, RequestRead, Rule, SubjectRead, TextRead, ToolRead
from ._store import ManifestStore, bundled_manifest_dir, parse_manifest

__all__ = [
    "HORIZONTAL_RULE",
    "MEMO_SIZE",
    "NO_MATCH",
    "REGIONS_HELP",
    "RULE_BUDGET_MS",
    "CompiledManifest",
    "CompiledRule",
    "Manifest",
    "ManifestError",
    "ManifestStore",
    "RequestRead",
    "Rule",
    "RuleTrace",
    "SubjectRead",
    "TextRead",
    "ToolRead",
    "Verdict",
    "backtracking_hazard",
    "bundled_manifest_dir",
    "compile_rule_pattern",
    "parse_manifest",
    "region_lines",
]
