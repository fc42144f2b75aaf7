"""Writes the mixed workloads of compliance-core: rules where about 30% fail.

- rules-mixed-100.json, rules-mixed-1000.json: 100 and 1,000 distinct pipeline rules
  (every rule has its own id, name, priority and, where the operator allows it
  without changing the verdict, its own expected value or pattern). All of them pass
  against pipeline.json; against pipeline-failing.json 30% of them fail, spread over
  all 18 operators, computed fields ($count, $length, $keys, $lines), wildcard paths
  and multi-condition rules, with hostile sizes among the failing values (a
  1,000-character string, a 40-line description, $keys over the whole `props`).
- pipeline-failing.json: pipeline.json with the mutations the failing templates see.

Run: python3 generate_mixed.py  (writes the three files beside it)
"""
import copy
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
SEMVER = r"^\d+\.\d+\.\d+$"

# Predicates that pass on both documents. `k` makes each copy distinct.
PASS = [
    lambda k: ("project", "regex", r"^[a-z]+$|^never%d$" % k),
    lambda k: ("props.synth.plugin.version", "regex", SEMVER + "|^never%d$" % k),
    lambda k: ("props.stages.3.steps.1.plugin.version", "regex", SEMVER + "|^v%d$" % k),
    lambda k: ("props.stages.3.steps.0.plugin.version", "regex", SEMVER + "|^x%d$" % k),
    lambda k: ("$count(props.stages)", "gte", 3),
    lambda k: ("$length(project)", "gt", 2),
    lambda k: ("props.stages.*.stageName", "notEmpty", None),
    lambda k: ("props.stages.*.steps", "countLt", 20 + k),
    lambda k: ("props.synth.plugin.name", "exists", None),
    lambda k: ("props.synth.plugin.token", "notExists", None),
    lambda k: ("props.stages", "countGt", 1),
    lambda k: ("props.project", "eq", "payments"),
    lambda k: ("props.stages.3.steps.1.env.APPROVAL", "in", ["manual", "auto", "x%d" % k]),
    lambda k: ("project", "notIn", ["x", "y%d" % k]),
    lambda k: ("project", "neq", "other%d" % k),
    lambda k: ("project", "lengthLt", 64 + k),
    lambda k: ("props.stages.2.steps.0.env.SEVERITY", "contains", "CRITICAL"),
    lambda k: ("props.stages.2.steps.0.env.SEVERITY", "notContains", "LOW%d" % k),
    lambda k: ("props.stages.2.steps.0.env.EXIT_CODE", "gte", 1),
    lambda k: ("props.stages.2.steps.0.env.EXIT_CODE", "lt", 2 + k),
    lambda k: ("$keys(props.synth.plugin)", "eq", ["name", "version"]),
    lambda k: ("$lines(props.stages.2.stageName)", "lte", 1 + k),
    lambda k: ("props.stages.3.steps.*.plugin.name", "in", ["cdk-deploy", "z%d" % k]),
    lambda k: ("props.stages.*.steps.*.name", "lengthGt", 2),
    lambda k: ("props.stages.0.stageName", "eq", "build"),
]

# Predicates that pass on pipeline.json and fail on pipeline-failing.json.
FAIL = [
    lambda k: ("accessModifier", "eq", "private"),
    lambda k: ("props.stages.*.steps.*.plugin.version", "neq", "latest"),
    lambda k: ("props.stages.1.steps.0.env.COVERAGE", "gt", 50 - k % 10),
    lambda k: ("props.stages.1.steps.0.env.COVERAGE", "gte", 80 - k % 10),
    lambda k: ("props.stages.1.steps.0.env.TIMEOUT", "lt", 3600 + k),
    lambda k: ("props.stages.1.steps.0.env.TIMEOUT", "lte", 600 + k),
    lambda k: ("description", "contains", "payments"),
    lambda k: ("$keys(props.stages.0.steps.0.env)", "notContains", "AWS_SECRET_ACCESS_KEY"),
    lambda k: ("props.synth.source.type", "in", ["github", "codecommit", "bitbucket", "x%d" % k]),
    lambda k: ("props.stages.*.steps.*.plugin.name", "notIn", ["curl-pipe-bash", "x%d" % k]),
    lambda k: ("props.stages.0.steps.0.plugin.version", "regex", SEMVER + "|^never%d$" % k),
    lambda k: ("props.synth.source.options.connectionArn", "exists", None),
    lambda k: ("props.stages.*.steps.*.env.DEBUG", "notExists", None),
    lambda k: ("organization", "notEmpty", None),
    lambda k: ("props.stages.0.steps.1.env", "countGt", 1),
    lambda k: ("props.stages.1.steps", "countLt", 3),
    lambda k: ("pipelineName", "lengthGt", 3),
    lambda k: ("props.synth.source.options.repo", "lengthLt", 64 + k),
    lambda k: ("$lines(description)", "lte", 20 + k % 5),
    lambda k: ("$keys(props)", "notContains", "secrets"),
    lambda k: ("$count(props.synth.source.options)", "eq", 3),
    lambda k: ("$length(props.synth.source.options.branch)", "lte", 64 + k % 7),
    lambda k: ("props.stages.*.steps.*.plugin.version", "regex", SEMVER + "|^w%d$" % k),
    lambda k: ("props.stages.*.steps.*.env.CI", "eq", "true"),
]
# Multi-condition rules (5% of the set); the first two fail on the failing document.
MULTI_FAIL = [
    lambda k: (("project", "eq", "payments"), [("props.organization", "eq", "acme")], "all"),
    lambda k: (("accessModifier", "eq", "private"), [("props.synth.source.type", "in", ["github", "x%d" % k])], "any"),
]
MULTI_PASS = [
    lambda k: (("props.stages.3.stageName", "eq", "deploy"), [("props.stages.3.steps.1.env.APPROVAL", "eq", "manual")], "all"),
    lambda k: (("project", "neq", "payments"), [("props.project", "eq", "payments")], "any"),
    lambda k: (("props.synth.plugin.name", "exists", None), [("props.synth.plugin.name", "notIn", ["x%d" % k])], "all"),
]


def rule(n, field, op, value, conditions=None, mode=None):
    r = {
        "id": "rule-%04d" % n,
        "name": "%s on %s #%d" % (op, field, n),
        "target": "pipeline",
        "severity": ["warning", "error", "critical"][n % 3],
        "field": field,
        "operator": op,
        "priority": (n * 97) % 10001,
        "tags": ["benchmark"],
    }
    if value is not None:
        r["value"] = value
    if conditions:
        r["conditions"] = [
            dict({"field": f, "operator": o}, **({"value": v} if v is not None else {}))
            for f, o, v in conditions
        ]
        r["conditionMode"] = mode
    return r


def workload(total):
    """30% failing (of which 2 in 100 multi-condition), 70% passing (3 in 100 multi)."""
    rules = []
    failing = total * 30 // 100
    multi_fail = total * 2 // 100
    multi_pass = total * 3 // 100
    n = 0
    for i in range(failing - multi_fail):
        n += 1
        rules.append(rule(n, *FAIL[i % len(FAIL)](i // len(FAIL))))
    for i in range(multi_fail):
        n += 1
        (f, o, v), conds, mode = MULTI_FAIL[i % len(MULTI_FAIL)](i // len(MULTI_FAIL))
        rules.append(rule(n, f, o, v, conds, mode))
    for i in range(multi_pass):
        n += 1
        (f, o, v), conds, mode = MULTI_PASS[i % len(MULTI_PASS)](i // len(MULTI_PASS))
        rules.append(rule(n, f, o, v, conds, mode))
    i = 0
    while len(rules) < total:
        n += 1
        rules.append(rule(n, *PASS[i % len(PASS)](i // len(PASS))))
        i += 1
    return rules


def failing_document():
    with open(os.path.join(HERE, "pipeline.json")) as f:
        doc = json.load(f)
    p = doc["props"]
    doc["accessModifier"] = "internal"
    doc["organization"] = ""
    doc["pipelineName"] = "px"
    doc["description"] = "\n".join("Line %d of a long, unowned description." % i for i in range(40))
    p["organization"] = "other"
    p["secrets"] = {"note": "a key that must not be here"}
    opts = p["synth"]["source"]["options"]
    p["synth"]["source"]["type"] = "s3"
    opts["repo"] = "acme/" + "r" * 995
    opts["branch"] = "feature/" + "b" * 292
    del opts["connectionArn"]
    opts["region"] = "us-east-1"
    opts["token"] = "t"
    s = p["stages"]
    s[0]["steps"][0]["plugin"]["version"] = "latest"
    s[0]["steps"][0]["env"]["AWS_SECRET_ACCESS_KEY"] = "x"
    s[0]["steps"][0]["env"]["CI"] = "false"
    s[1]["steps"][0]["env"]["COVERAGE"] = "30"
    s[1]["steps"][0]["env"]["TIMEOUT"] = "9000"
    s[1]["steps"][1]["plugin"]["name"] = "curl-pipe-bash"
    s[1]["steps"].append({"name": "e2e", "plugin": {"name": "cypress", "version": "13.6.0"}, "env": {"DEBUG": "1"}})
    s[0]["steps"][1]["env"] = {}
    return doc


def main():
    for total in (100, 1000):
        with open(os.path.join(HERE, "rules-mixed-%d.json" % total), "w") as f:
            json.dump(workload(total), f, indent=1)
            f.write("\n")
    with open(os.path.join(HERE, "pipeline-failing.json"), "w") as f:
        json.dump(failing_document(), f, indent=1)
        f.write("\n")


main()
