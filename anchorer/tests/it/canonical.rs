//! `deploy_canonical` on a real anvil: the contract lands at the published address through
//! the CREATE2 deployer, a second deployment sends nothing, and a chain without the deployer
//! or with foreign code at the address is refused by name.

use afr_anchorer::{
    AnchorError, Deployed, Settings, anchor_pending, create2_deployer, deploy_canonical,
    runtime_code, signer_from_hex,
};
use afr_core::deployment::{ANCHOR_ADDRESS, CREATE2_DEPLOYER};
use afr_testkit::{DEV_ADDR, anvil, cast_at as cast};

use super::{KEY, recorder};

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn deploys_at_the_canonical_address_once_and_refuses_without_the_deployer() {
    let chain = anvil();
    let rt = runtime();
    let deploy = || rt.block_on(deploy_canonical(&chain.url, signer_from_hex(KEY).unwrap()));
    let nonce = || cast(&chain.url, &["nonce", DEV_ADDR]);

    // Anvil has the deployer from genesis; take it away to see the refusal.
    let deployer_code = cast(&chain.url, &["code", CREATE2_DEPLOYER]);
    assert!(deployer_code.len() > 2, "anvil has no CREATE2 deployer");
    cast(
        &chain.url,
        &["rpc", "anvil_setCode", CREATE2_DEPLOYER, "0x"],
    );
    let e = deploy().unwrap_err();
    assert!(
        matches!(e, AnchorError::DeployerMissing { deployer, chain_id: 31337 }
            if deployer == create2_deployer().unwrap()),
        "{e}"
    );
    let msg = e.to_string();
    assert!(
        msg.contains(&create2_deployer().unwrap().to_string()) && msg.contains("pre-signed"),
        "{msg}"
    );
    assert_eq!(nonce(), "0", "nothing sent");
    cast(
        &chain.url,
        &["rpc", "anvil_setCode", CREATE2_DEPLOYER, &deployer_code],
    );

    // First deployment: one transaction, the genuine runtime code at the published address.
    let first = deploy().unwrap();
    assert_eq!(first.address.to_checksum(None), ANCHOR_ADDRESS);
    assert!(first.tx.is_some());
    assert_eq!(nonce(), "1");
    let code = cast(&chain.url, &["code", ANCHOR_ADDRESS]);
    assert_eq!(code, runtime_code().unwrap().to_string());

    // Second deployment: the same address, nothing sent.
    let again = deploy().unwrap();
    assert_eq!(
        again,
        Deployed {
            address: first.address,
            tx: None
        }
    );
    assert_eq!(nonce(), "1", "a second deploy is a no-op");

    // The canonical contract anchors.
    let tmp = tempfile::tempdir().unwrap();
    let r = recorder(&tmp.path().join("a"), 25); // 2 sealed epochs
    let settings = Settings {
        rpc_url: chain.url.clone(),
        contract: first.address,
        max_batch: 64,
        max_gas_price_wei: 100_000_000_000,
        confirmations: 1,
    };
    let p = rt
        .block_on(anchor_pending(
            r.store(),
            signer_from_hex(KEY).unwrap(),
            &settings,
        ))
        .unwrap();
    assert_eq!(p.posted, vec![0, 1]);

    // Foreign code at the address is not taken for AfrAnchor.
    cast(
        &chain.url,
        &["rpc", "anvil_setCode", ANCHOR_ADDRESS, "0x6000"],
    );
    assert!(matches!(
        deploy(),
        Err(AnchorError::NotAfrAnchor { address }) if address == first.address
    ));
}
