#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::json;

use super::*;

fn valid(schema: &Value, v: &Value) -> bool {
    jsonschema::validator_for(schema).unwrap().is_valid(v)
}

fn body(v: Value) -> Map<String, Value> {
    v.as_object().unwrap().clone()
}

#[test]
fn a_forced_openai_tool_is_called_with_arguments_of_its_schema() {
    let params = json!({
        "type": "object",
        "properties": {
            "clause": {"type": "string", "minLength": 12},
            "risk": {"type": "string", "enum": ["low", "high"]},
            "score": {"type": "integer", "minimum": 3, "maximum": 9},
            "due": {"type": "string", "format": "date"},
            "tags": {"type": "array", "items": {"type": "string"}, "minItems": 2},
            "party": {"$ref": "#/$defs/party"}
        },
        "required": ["clause", "risk", "score", "due", "tags", "party"],
        "additionalProperties": false,
        "$defs": {"party": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}}
    });
    let b = body(json!({
        "tools": [
            {"type": "function", "function": {"name": "other", "parameters": {"type": "object"}}},
            {"type": "function", "function": {"name": "flag_clause", "parameters": params}}
        ],
        "tool_choice": {"type": "function", "function": {"name": "flag_clause"}}
    }));
    let Shape::Tool { name, arguments } = shape_of(&b) else {
        panic!("expected a tool call");
    };
    assert_eq!(name, "flag_clause");
    let args: Value = serde_json::from_str(&arguments).unwrap();
    assert!(valid(&params, &args), "{args}");
    assert_eq!(args["risk"], "low");
    assert_eq!(args["score"], 3);
}

#[test]
fn required_and_any_take_the_first_tool_and_auto_answers_text() {
    let openai = body(json!({
        "tools": [{"type": "function", "function": {"name": "a", "parameters": {"type": "object", "properties": {"x": {"type": "number"}}}}}],
        "tool_choice": "required"
    }));
    assert!(matches!(shape_of(&openai), Shape::Tool { name, .. } if name == "a"));
    let anthropic = body(json!({
        "tools": [{"name": "b", "input_schema": {"type": "object", "properties": {"y": {"type": "boolean"}}}}],
        "tool_choice": {"type": "any"}
    }));
    let Shape::Tool { name, arguments } = shape_of(&anthropic) else {
        panic!("expected a tool call");
    };
    assert_eq!((name.as_str(), arguments.as_str()), ("b", r#"{"y":true}"#));
    let auto = body(json!({
        "tools": [{"type": "function", "function": {"name": "a"}}],
        "tool_choice": "auto"
    }));
    assert_eq!(shape_of(&auto), Shape::Text);
}

#[test]
fn json_schema_and_json_object_formats_give_valid_json() {
    let schema = json!({
        "type": "object",
        "properties": {
            "findings": {"type": "array", "items": {"type": "object", "properties": {
                "rule": {"type": "string"}, "severity": {"anyOf": [{"type": "integer", "minimum": 1}, {"type": "null"}]}
            }, "required": ["rule", "severity"]}},
            "summary": {"type": ["string", "null"], "maxLength": 3}
        },
        "required": ["findings", "summary"]
    });
    let b = body(
        json!({"response_format": {"type": "json_schema", "json_schema": {"name": "review", "strict": true, "schema": schema}}}),
    );
    let Shape::Json(text) = shape_of(&b) else {
        panic!("expected JSON");
    };
    let v: Value = serde_json::from_str(&text).unwrap();
    assert!(valid(&schema, &v), "{v}");
    let b = body(json!({"response_format": {"type": "json_object"}}));
    let Shape::Json(text) = shape_of(&b) else {
        panic!("expected JSON");
    };
    assert!(serde_json::from_str::<Map<String, Value>>(&text).is_ok());
    assert_eq!(
        shape_of(&body(json!({"response_format": {"type": "text"}}))),
        Shape::Text
    );
}

#[test]
fn a_recursive_schema_ends() {
    let schema = json!({"$ref": "#/$defs/node", "$defs": {"node": {"type": "object",
        "properties": {"child": {"$ref": "#/$defs/node"}}}}});
    let v = value_of(&schema, &schema, 0);
    assert!(v.is_object());
}
