//! The rule editor: a draft as the form holds it, the entities to try it on, its
//! preview through the dry run, and its save through the API.

use super::*;

/// The editor's fields, as the form holds them.
#[derive(Default)]
pub struct Draft {
    id: String,
    name: String,
    target: String,
    severity: String,
    field: String,
    operator: String,
    value: String,
    priority: String,
    tags: String,
    scope: String,
    condition_mode: String,
    conditions: String,
    propagate: bool,
    attributes: String,
    /// An entity of the inventory to preview on (its id), instead of the pasted
    /// document.
    entity: String,
}

impl Draft {
    fn of(rule: &Rule) -> Draft {
        Draft {
            id: rule.id.clone(),
            name: rule.name.clone(),
            target: api::wire(&rule.target),
            severity: api::wire(&rule.severity),
            field: rule.field.clone(),
            operator: api::wire(&rule.operator),
            value: shown(&rule.value),
            priority: rule.priority.to_string(),
            tags: rule.tags.join(", "),
            scope: api::wire(&rule.scope),
            condition_mode: api::wire(&rule.condition_mode),
            conditions: if rule.conditions.is_empty() {
                String::new()
            } else {
                serde_json::to_string_pretty(&rule.conditions).unwrap_or_default()
            },
            propagate: rule.propagate_to_children,
            attributes: String::new(),
            entity: String::new(),
        }
    }

    fn posted(form: &HashMap<String, String>) -> Draft {
        let raw = |name: &str| form.get(name).cloned().unwrap_or_default();
        Draft {
            id: field(form, "ruleId").to_owned(),
            name: field(form, "name").to_owned(),
            target: field(form, "target").to_owned(),
            severity: field(form, "severity").to_owned(),
            field: field(form, "field").to_owned(),
            operator: field(form, "operator").to_owned(),
            value: raw("value"),
            priority: field(form, "priority").to_owned(),
            tags: field(form, "tags").to_owned(),
            scope: field(form, "scope").to_owned(),
            condition_mode: field(form, "conditionMode").to_owned(),
            conditions: raw("conditions"),
            propagate: field(form, "propagateToChildren") == "on",
            attributes: raw("attributes"),
            entity: field(form, "entity").to_owned(),
        }
    }

    /// The rule's body as the API reads it, or the fields the form itself finds
    /// wrong (the API judges everything else).
    fn body(&self) -> Result<Value, Vec<(String, String)>> {
        let mut wrong = Vec::new();
        let value = match self.value.trim() {
            "" => Value::Null,
            // A JSON value as such; any other text is a string.
            text => serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_owned())),
        };
        let priority = match self.priority.as_str() {
            "" => json!(0),
            text => match text.parse::<i64>() {
                Ok(number) => json!(number),
                Err(_) => {
                    wrong.push(("priority".to_owned(), "a whole number".to_owned()));
                    Value::Null
                }
            },
        };
        let conditions = match self.conditions.trim() {
            "" => json!([]),
            text => match serde_json::from_str::<Value>(text) {
                Ok(list @ Value::Array(_)) => list,
                _ => {
                    wrong.push((
                        "conditions".to_owned(),
                        "a JSON array of conditions ({\"field\", \"operator\", \"value\", \"dependsOnRule\"})".to_owned(),
                    ));
                    Value::Null
                }
            },
        };
        if !wrong.is_empty() {
            return Err(wrong);
        }
        let tags: Vec<&str> = self
            .tags
            .split(',')
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .collect();
        let mut body = Map::new();
        if !self.id.is_empty() {
            body.insert("id".to_owned(), json!(self.id));
        }
        for (key, text) in [
            ("name", &self.name),
            ("target", &self.target),
            ("severity", &self.severity),
            ("field", &self.field),
            ("operator", &self.operator),
            ("scope", &self.scope),
            ("conditionMode", &self.condition_mode),
        ] {
            body.insert(key.to_owned(), json!(text));
        }
        body.insert("value".to_owned(), value);
        body.insert("priority".to_owned(), priority);
        body.insert("tags".to_owned(), json!(tags));
        body.insert("conditions".to_owned(), conditions);
        body.insert("propagateToChildren".to_owned(), json!(self.propagate));
        Ok(Value::Object(body))
    }

    /// The pasted attribute document: a JSON object, or YAML.
    fn document(&self) -> Result<Value, (String, String)> {
        let wrong = || {
            (
                "attributes".to_owned(),
                "an attribute document: a JSON object, or YAML".to_owned(),
            )
        };
        page::pasted_object(&self.attributes).ok_or_else(wrong)
    }
}

/// A choice of a select: its wire name and whether it is the one chosen.
pub struct Choice {
    name: String,
    chosen: bool,
}

pub(super) fn choices(names: impl IntoIterator<Item = String>, chosen: &str) -> Vec<Choice> {
    names
        .into_iter()
        .map(|name| Choice {
            chosen: name == chosen,
            name,
        })
        .collect()
}

/// An entity of the inventory the preview may use.
pub struct Candidate {
    id: String,
    label: String,
    chosen: bool,
}

/// A violation the preview found.
pub struct Found {
    rule: String,
    severity: String,
    message: String,
    this_rule: bool,
}

/// What the preview found.
pub struct Preview {
    blocked: bool,
    violations: Vec<Found>,
    exempted: usize,
}

#[derive(Template)]
#[template(path = "console/rule_edit.html")]
pub(super) struct EditPage {
    frame: Frame,
    draft: Draft,
    targets: Vec<Choice>,
    severities: Vec<Choice>,
    operators: Vec<Choice>,
    scopes: Vec<Choice>,
    modes: Vec<Choice>,
    /// The fields at fault, with what is wrong, as the API or the form named them.
    problems: Vec<(String, String)>,
    preview: Option<Preview>,
    /// The inventory's entities of the rule's target to preview on.
    entities: Vec<Candidate>,
}

impl EditPage {
    /// What is wrong with `name`, when something is.
    fn problem(&self, name: &str) -> Option<&str> {
        self.problems
            .iter()
            .find(|(field, _)| {
                field == name
                    || field.starts_with(&format!("{name}["))
                    || field.starts_with(&format!("{name}."))
            })
            .map(|(_, message)| message.as_str())
    }
}

pub(super) fn wire_names<T: serde::Serialize>(all: impl IntoIterator<Item = T>) -> Vec<String> {
    all.into_iter().map(|v| api::wire(&v)).collect()
}

pub(super) async fn show_editor(
    console: &Console,
    visitor: &Visitor,
    q: &HashMap<String, String>,
    draft: Option<Draft>,
    Answered {
        outcome,
        problems,
        preview,
    }: Answered,
) -> Result<Response, Refusal> {
    let mut frame = Frame::load(console, visitor, q, ("Edit a rule", "/console/rules")).await?;
    if frame.org.is_empty() {
        return Ok(page::empty(frame));
    }
    let draft = match (draft, q.get("rule").filter(|r| !r.is_empty())) {
        (Some(draft), _) => draft,
        (None, Some(id)) => {
            let uri = format!("/api/compliance/rules/{}", segment(id)?);
            let stored: Option<OrgRule> =
                frame.read(visitor, ("listRules", "the rule"), &uri).await?;
            stored.map(|r| Draft::of(&r.rule)).unwrap_or_default()
        }
        (None, None) => Draft {
            target: "pipeline".to_owned(),
            severity: "error".to_owned(),
            operator: "eq".to_owned(),
            scope: "org".to_owned(),
            condition_mode: "all".to_owned(),
            priority: "0".to_owned(),
            ..Draft::default()
        },
    };
    let entities = entities_of(&mut frame, visitor, &draft).await?;
    let code = frame.settle(outcome);
    let page = EditPage {
        entities,
        targets: choices(
            wire_names([Target::Pipeline, Target::Plugin]),
            &draft.target,
        ),
        severities: choices(
            wire_names([Severity::Warning, Severity::Error, Severity::Critical]),
            &draft.severity,
        ),
        operators: choices(wire_names(Operator::ALL.iter().copied()), &draft.operator),
        scopes: choices(wire_names([Scope::Org, Scope::Published]), &draft.scope),
        modes: choices(
            wire_names([ConditionMode::All, ConditionMode::Any]),
            &draft.condition_mode,
        ),
        frame,
        draft,
        problems,
        preview,
    };
    Ok(page::render(&page, code))
}

/// The inventory's entities of the draft's target the preview may use (the latest
/// 50, by name), the one chosen marked; none for a target the inventory does not
/// hold or a visitor the API would not show them to.
pub(super) async fn entities_of(
    frame: &mut Frame,
    visitor: &Visitor,
    draft: &Draft,
) -> Result<Vec<Candidate>, Refusal> {
    let named: Vec<(String, String)> = match draft.target.as_str() {
        "pipeline" => frame
            .list::<Pipeline>(
                visitor,
                ("listPipelines", "pipelines"),
                "/api/pipelines?limit=50",
                "pipelines",
            )
            .await?
            .items
            .into_iter()
            .map(|p| (p.id, p.pipeline_name))
            .collect(),
        "plugin" => frame
            .list::<Plugin>(
                visitor,
                ("listPlugins", "plugins"),
                "/api/plugins?limit=50",
                "plugins",
            )
            .await?
            .items
            .into_iter()
            .map(|p| (p.id, format!("{}@{}", p.name, p.version)))
            .collect(),
        _ => Vec::new(),
    };
    Ok(named
        .into_iter()
        .map(|(id, label)| Candidate {
            chosen: id == draft.entity,
            label,
            id,
        })
        .collect())
}

/// The document an entity of the inventory is judged on, from its answer through
/// the API (decoded into the API's own type, as every answer is): the members the
/// workflow judges ([`pipelines::JUDGED_FIELDS`], [`plugins::JUDGED_FIELDS`]), which
/// the answer carries under the same names.
pub(super) async fn entity_document(
    api: &api::Api,
    org: &str,
    target: &str,
    id: &str,
) -> Result<Value, Refusal> {
    let id = segment(id)?;
    let (answer, judged): (Value, &[&str]) = match target {
        "pipeline" => {
            let uri = format!("/api/pipelines/{id}");
            let entity: Pipeline = api.get(&uri, Some(org)).await?;
            (json!(entity), &pipelines::JUDGED_FIELDS)
        }
        "plugin" => {
            let uri = format!("/api/plugins/{id}");
            let entity: Plugin = api.get(&uri, Some(org)).await?;
            (json!(entity), &plugins::JUDGED_FIELDS)
        }
        _ => return Err(Refusal::invalid("entity: this target has no inventory")),
    };
    Ok(Value::Object(
        judged
            .iter()
            .map(|name| {
                let value = answer.get(*name).cloned().unwrap_or(Value::Null);
                ((*name).to_owned(), value)
            })
            .collect(),
    ))
}

/// What the editor shows after a form: the action's outcome, the fields at fault,
/// what the preview found.
#[derive(Default)]
pub(super) struct Answered {
    outcome: Option<Result<String, Refusal>>,
    problems: Vec<(String, String)>,
    preview: Option<Preview>,
}

/// `GET /console/rules/edit` (`?rule=<id>` edits that rule, else a new one).
pub async fn editor(
    State(console): State<Console>,
    visitor: Visitor,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    show_editor(&console, &visitor, &q, None, Answered::default())
        .await
        .unwrap_or_else(page::refused)
}

/// `POST /console/rules/edit`: `preview` (the dry-run endpoint with the rule being
/// written and the pasted document: nothing is stored) or `save` (a new rule, or a
/// new version of the one edited). A refusal names its fields beside them.
pub async fn edit(State(console): State<Console>, posted: Posted) -> Response {
    let Posted { visitor, form } = posted;
    let org = field(&form, "org").to_owned();
    let mut draft = Draft::posted(&form);
    let mut problems = Vec::new();
    let mut preview = None;
    // The document of the entity previewed on, shown in place of a pasted one.
    let mut judged = None;
    let outcome = async {
        let body = draft.body().map_err(|wrong| {
            problems.extend(wrong);
            form_refusal()
        })?;
        match field(&form, "action") {
            "preview" => {
                let target = segment(&draft.target)?;
                let (document, entity_id) = if draft.entity.is_empty() {
                    let document = draft.document().map_err(|wrong| {
                        problems.push(wrong);
                        form_refusal()
                    })?;
                    (document, None)
                } else {
                    let document =
                        entity_document(&visitor.api, &org, target, &draft.entity).await?;
                    judged = Some(serde_json::to_string_pretty(&document).unwrap_or_default());
                    (document, Some(draft.entity.as_str()))
                };
                let uri = format!("/api/compliance/validate/{target}/dry-run");
                let verdict: Verdict = api::act_naming(
                    &visitor.api,
                    (Method::POST, &uri),
                    &org,
                    json!({"attributes": document, "entityId": entity_id, "rule": body}),
                )
                .await
                .map_err(|named| take(named, &mut problems))?;
                let notice = if verdict.violations.is_empty() {
                    "the preview passes".to_owned()
                } else {
                    format!(
                        "the preview finds {} violation(s){}",
                        verdict.violations.len(),
                        if verdict.blocked { " and blocks" } else { "" }
                    )
                };
                preview = Some(Preview {
                    blocked: verdict.blocked,
                    exempted: verdict.exempted.len(),
                    violations: verdict
                        .violations
                        .iter()
                        .map(|v| Found {
                            this_rule: v.rule_name() == draft.name,
                            rule: v.rule_name().to_owned(),
                            severity: api::wire(&v.severity()),
                            message: v.message(),
                        })
                        .collect(),
                });
                Ok(notice)
            }
            "save" => {
                let saved: OrgRule = if draft.id.is_empty() {
                    api::act_naming(
                        &visitor.api,
                        (Method::POST, "/api/compliance/rules"),
                        &org,
                        body,
                    )
                    .await
                } else {
                    let uri = format!("/api/compliance/rules/{}", segment(&draft.id)?);
                    api::act_naming(&visitor.api, (Method::PUT, &uri), &org, body).await
                }
                .map_err(|named| take(named, &mut problems))?;
                Ok(format!(
                    "rule {} saved at version {}",
                    saved.rule.name, saved.rule.version
                ))
            }
            _ => Err(unknown_action()),
        }
    }
    .await;
    if let Some(document) = judged {
        draft.attributes = document;
    }
    let saved = outcome.is_ok() && field(&form, "action") == "save";
    let q = page::again(org);
    if saved {
        // Saved: the list, with the confirmation.
        return show_rules(&console, &visitor, &q, Some(outcome))
            .await
            .unwrap_or_else(page::refused);
    }
    let answered = Answered {
        outcome: Some(outcome),
        problems,
        preview,
    };
    show_editor(&console, &visitor, &q, Some(draft), answered)
        .await
        .unwrap_or_else(page::refused)
}

/// The refusal of a form the console itself finds wrong (its fields say where).
pub(super) fn form_refusal() -> Refusal {
    Refusal::invalid("the form has fields to correct")
}

/// A refusal, its named fields kept for the form.
pub(super) fn take(named: Named, problems: &mut Vec<(String, String)>) -> Refusal {
    problems.extend(named.problems);
    named.refusal
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_form_reads_values_as_json_else_as_text_and_names_its_own_faults() {
        let form: HashMap<String, String> = [
            ("name", "No public"),
            ("target", "pipeline"),
            ("severity", "error"),
            ("field", "accessModifier"),
            ("operator", "eq"),
            ("value", "public"),
            ("priority", "5"),
            ("tags", "a, ,b"),
            ("scope", "org"),
            ("conditionMode", "all"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        let body = Draft::posted(&form).body().unwrap();
        assert_eq!(body["value"], "public");
        assert_eq!(body["priority"], 5);
        assert_eq!(body["tags"], json!(["a", "b"]));
        assert_eq!(body["conditions"], json!([]));
        assert!(body.get("id").is_none(), "a new rule names no id");
        let rule: Rule = serde_json::from_value(body).unwrap();
        assert_eq!(rule.name, "No public");

        let mut numeric = form.clone();
        numeric.insert("value".to_owned(), "[1, 2]".to_owned());
        assert_eq!(
            Draft::posted(&numeric).body().unwrap()["value"],
            json!([1, 2])
        );

        let mut wrong = form.clone();
        wrong.insert("priority".to_owned(), "high".to_owned());
        wrong.insert("conditions".to_owned(), "{\"field\": 1}".to_owned());
        let faults = Draft::posted(&wrong).body().unwrap_err();
        let named: Vec<&str> = faults.iter().map(|(f, _)| f.as_str()).collect();
        assert_eq!(named, vec!["priority", "conditions"]);
    }

    #[test]
    fn a_pasted_document_is_a_json_or_yaml_object() {
        let with = |text: &str| Draft {
            attributes: text.to_owned(),
            ..Draft::default()
        };
        assert_eq!(with("{\"a\": 1}").document().unwrap(), json!({"a": 1}));
        assert_eq!(
            with("a: 1\nb: x\n").document().unwrap(),
            json!({"a": 1, "b": "x"})
        );
        for wrong in ["", "[1]", "just text", "- a\n- b"] {
            assert_eq!(
                with(wrong).document().unwrap_err().0,
                "attributes",
                "{wrong}"
            );
        }
    }
}
