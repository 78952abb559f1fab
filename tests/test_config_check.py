"""Config checks shared by both workflows (pnc.study.config_check)."""

from pnc.study.config_check import integer_seeds, schema_problems

SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "seeds": {"type": "array", "items": {"type": "integer"}, "minItems": 1},
        "sigma": {"type": "number", "exclusiveMinimum": 0},
        "norm": {"enum": ["radius", "gaussian"]},
    },
    "required": ["seeds"],
}


def test_command_line_seeds_are_read_as_integers_and_others_left_for_the_schema():
    config = {"seeds": ["0", " 12", "-3", "a", 1.5, 4]}
    integer_seeds(config)
    assert config["seeds"] == [0, 12, -3, "a", 1.5, 4]
    assert schema_problems(config, SCHEMA) == [
        "seeds[3] = 'a': must be of type integer",
        "seeds[4] = 1.5: must be of type integer",
    ]
    untouched = {"envs": ["Hopper"]}
    integer_seeds(untouched)
    assert untouched == {"envs": ["Hopper"]}


def test_each_violation_is_one_line_naming_key_value_and_rule():
    problems = schema_problems({"sigma": 0, "norm": "box", "extra": 1}, SCHEMA)
    assert sorted(problems) == [
        "(top level): missing required key(s) seeds",
        "(top level): unknown key(s) extra; allowed: seeds, sigma, norm",
        "norm = 'box': not one of radius, gaussian",
        "sigma = 0: must be > 0",
    ]
    assert schema_problems({"seeds": [1]}, SCHEMA) == []
