//! A bridge test asked for where its server cannot be started fails, saying how to install
//! one: an ignored test that was explicitly requested never passes without running.

use std::process::Command;

/// Runs an ignored test of this binary, asked for by name, with the server or the module
/// pointing nowhere (where the module is missing, the server is any file: it is never started).
#[test]
fn an_ignored_test_asked_for_without_a_server_fails_and_says_how_to_install_one() {
    let test = "penetration_guard::a_deleted_key_is_refused_after_its_delete";
    let this = std::env::current_exe().unwrap();
    let some_file = this.to_str().unwrap();
    for (server, module, missing) in [
        (
            "/nonexistent/redis-server",
            None,
            "/nonexistent/redis-server",
        ),
        (
            some_file,
            Some("/nonexistent/redisbloom.so"),
            "/nonexistent/redisbloom.so",
        ),
    ] {
        let mut run = Command::new(&this);
        run.args(["--include-ignored", "--exact", test])
            .env("REDIS_SERVER", server)
            .env_remove("CI");
        if let Some(module) = module {
            run.env("REDISBLOOM_MODULE", module);
        }
        let out = run.output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout) + String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{missing}: {text}");
        assert!(text.contains("1 failed"), "{missing}: {text}");
        assert!(text.contains(missing), "{missing}: {text}");
        assert!(
            text.contains("bash scripts/install-redis.sh"),
            "{missing}: {text}"
        );
    }
}
