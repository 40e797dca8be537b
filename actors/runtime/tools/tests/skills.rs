//! A skill snapshot's locations, read through the `read` tool as the model would.

use crate::skills::SkillSnapshot;
use crate::skills::tests::{Fx, desc};
use crate::tools::Tool;
use std::fs;

#[tokio::test]
async fn the_model_can_read_every_location_it_is_given() {
    let fx = Fx::new();
    fx.skill("ws/skills", "local", &desc("in the workspace"));
    fx.skill("bundled", "outside", &desc("outside the workspace"));
    fs::create_dir_all(fx.path("bundled/outside/scripts")).unwrap();
    fs::write(fx.path("bundled/outside/scripts/run.sh"), "echo hi\n").unwrap();
    let snapshot = SkillSnapshot::build(&fx.catalog(&[]));
    let outside = snapshot
        .skills
        .iter()
        .find(|s| s.name == "outside")
        .unwrap();
    assert_eq!(outside.location, ".skills/outside/SKILL.md");
    assert!(outside.materialised);
    let ctx = crate::tools::ToolContext {
        workspace: fx.path("ws"),
        agent: clawbus_core::ids::AgentId::new("a"),
        session: clawbus_core::ids::SessionKey::parse("agent:a:s").unwrap(),
        channel: "test".into(),
        run: None,
    };
    for skill in &snapshot.skills {
        let args = serde_json::json!({ "path": skill.location });
        let out = crate::tools::ReadTool.call(&ctx, args).await;
        assert!(!out.is_error, "{}: {}", skill.location, out.text);
        assert!(
            out.text.contains(&format!("Do the {} thing.", skill.name)),
            "{}",
            out.text
        );
    }
    assert_eq!(
        fs::read_to_string(fx.path("ws/.skills/outside/scripts/run.sh")).unwrap(),
        "echo hi\n",
        "the skill's other files are copied too"
    );
}
