"""Writes rules-100.json: the benchmark workload of compliance-core.

100 pipeline rules that all pass against pipeline.json, using every one of the 18
operators, 10 regexes, 10 computed fields, 5 wildcard paths and 5 multi-condition
rules. Run: python3 generate_rules.py > rules-100.json
"""
import json

SEMVER = r"^\d+\.\d+\.\d+$"
predicates = [
    # 10 regexes
    ("props.synth.plugin.version", "regex", SEMVER),
    ("props.stages.0.steps.0.plugin.version", "regex", SEMVER),
    ("props.stages.1.steps.0.plugin.version", "regex", SEMVER),
    ("props.stages.3.steps.1.plugin.version", "regex", SEMVER),
    ("pipelineName", "regex", r"^[a-z][a-z0-9-]{2,62}$"),
    ("project", "regex", r"^[a-z]+$"),
    ("props.synth.source.options.branch", "regex", r"^(main|release/.+)$"),
    ("props.synth.source.options.connectionArn", "regex", r"^arn:aws:codestar-connections:"),
    ("props.synth.source.options.repo", "regex", r"^acme/"),
    ("props.stages.2.steps.0.env.SEVERITY", "regex", r"CRITICAL"),
    # 10 computed fields
    ("$count(props.stages)", "gte", 3),
    ("$count(props.stages.0.steps)", "lte", 10),
    ("$length(pipelineName)", "lt", 64),
    ("$length(project)", "gt", 2),
    ("$keys(props.synth.plugin)", "eq", ["name", "version"]),
    ("$keys(props.stages.0.steps.0.env)", "notContains", "AWS_SECRET_ACCESS_KEY"),
    ("$lines(description)", "lte", 20),
    ("$count(props.synth.source.options)", "eq", 3),
    ("$keys(props.stages.3.steps.1.env)", "in", ["STAGE", "APPROVAL", "REGION"]),
    ("$length(props.synth.source.options.branch)", "lte", 255),
    # 5 wildcard paths
    ("props.stages.*.stageName", "notEmpty", None),
    ("props.stages.*.steps.*.plugin.name", "notIn", ["curl-pipe-bash", "unverified"]),
    ("props.stages.*.steps.*.plugin.version", "neq", "latest"),
    ("props.stages.*.steps.*.env.DEBUG", "notExists", None),
    ("props.stages.*.steps", "countLt", 20),
]
# Everything else, cycling through every operator.
plain = [
    ("accessModifier", "eq", "private"),
    ("accessModifier", "neq", "public"),
    ("props.stages.1.steps.0.env.COVERAGE", "gt", 50),
    ("props.stages.1.steps.0.env.COVERAGE", "gte", 80),
    ("props.stages.1.steps.0.env.TIMEOUT", "lt", 3600),
    ("props.stages.1.steps.0.env.TIMEOUT", "lte", 600),
    ("description", "contains", "payments"),
    ("description", "notContains", "password"),
    ("props.synth.source.type", "in", ["github", "codecommit", "bitbucket"]),
    ("props.synth.source.type", "notIn", ["s3", "ftp"]),
    ("props.synth.plugin.name", "exists", None),
    ("props.synth.plugin.token", "notExists", None),
    ("organization", "notEmpty", None),
    ("props.stages", "countGt", 1),
    ("props.stages.0.steps", "countLt", 10),
    ("pipelineName", "lengthGt", 3),
    ("pipelineName", "lengthLt", 64),
    ("props.organization", "eq", "acme"),
]
assert len(predicates) == 25
rules = []
n = 0
def add(field, op, value, conditions=None, mode=None):
    global n
    n += 1
    rule = {
        "id": f"rule-{n:03d}",
        "name": f"{op} on {field} #{n}",
        "target": "pipeline",
        "severity": ["warning", "error", "critical"][n % 3],
        "field": field,
        "operator": op,
        "priority": (n * 97) % 10001,
        "tags": ["benchmark"],
    }
    if value is not None:
        rule["value"] = value
    if conditions:
        rule["conditions"] = conditions
        rule["conditionMode"] = mode
    rules.append(rule)

for field, op, value in predicates:
    add(field, op, value)
# 5 multi-condition rules
multi = [
    (("accessModifier", "neq", "public"), [("description", "exists", None)], "any"),
    (("props.synth.source.type", "eq", "github"), [("props.synth.source.options.connectionArn", "exists", None), ("props.synth.source.options.branch", "notEmpty", None)], "all"),
    (("props.stages.3.stageName", "eq", "deploy"), [("props.stages.3.steps.1.env.APPROVAL", "eq", "manual")], "all"),
    (("project", "eq", "payments"), [("props.project", "eq", "payments"), ("props.organization", "eq", "acme")], "all"),
    (("accessModifier", "eq", "public"), [("props.stages.*.steps.*.plugin.version", "regex", SEMVER)], "any"),
]
for (field, op, value), conds, mode in multi:
    add(field, op, value, [
        {"field": f, "operator": o, **({"value": v} if v is not None else {})} for f, o, v in conds
    ], mode)
i = 0
while len(rules) < 100:
    field, op, value = plain[i % len(plain)]
    add(field, op, value)
    i += 1
print(json.dumps(rules, indent=1))
