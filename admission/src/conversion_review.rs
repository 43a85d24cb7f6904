//! A CRD conversion webhook's answer to kube-apiserver: a `ConversionReview` whose request
//! lists objects and the `desiredAPIVersion`, answered with the same review carrying every
//! object converted, or a `Failure` naming the first that could not be. HCO's webhook
//! answers it at `/convert` for the HyperConverged (v1beta1 ⇄ v1).

use serde_json::{Value, json};

/// Converts one object to an API version, or says why it cannot.
pub type Convert = fn(&Value, &str) -> Result<Value, String>;

/// The answer to `review` (a ConversionReview), in the review's own apiVersion.
pub fn answer(review: &Value, convert: Convert) -> Value {
    let request = &review["request"];
    let desired = request["desiredAPIVersion"].as_str().unwrap_or_default();
    let objects = request["objects"].as_array().cloned().unwrap_or_default();
    let converted: Result<Vec<Value>, String> = objects
        .iter()
        .map(|object| convert(object, desired))
        .collect();
    let response = match converted {
        Ok(objects) => json!({
            "uid": request["uid"],
            "convertedObjects": objects,
            "result": {"status": "Success"},
        }),
        Err(message) => json!({
            "uid": request["uid"],
            "convertedObjects": [],
            "result": {"status": "Failure", "message": message},
        }),
    };
    let api_version = review["apiVersion"]
        .as_str()
        .unwrap_or("apiextensions.k8s.io/v1");
    json!({"apiVersion": api_version, "kind": "ConversionReview", "response": response})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn review(objects: Value, desired: &str) -> Value {
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
               "request": {"uid": "u-1", "desiredAPIVersion": desired, "objects": objects}})
    }

    #[test]
    fn every_object_is_converted_and_the_uid_kept() {
        let hc = json!({"apiVersion": "hco.kubevirt.io/v1beta1", "kind": "HyperConverged",
                        "metadata": {"name": "kubevirt-hyperconverged"},
                        "spec": {"uninstallStrategy": "RemoveWorkloads"}});
        let answer = answer(
            &review(json!([hc.clone(), hc]), "hco.kubevirt.io/v1"),
            api::hco::conversion::webhook,
        );
        let response = &answer["response"];
        assert_eq!(response["uid"], "u-1");
        assert_eq!(response["result"]["status"], "Success");
        let converted = response["convertedObjects"].as_array().unwrap();
        assert_eq!(converted.len(), 2);
        assert_eq!(converted[0]["apiVersion"], "hco.kubevirt.io/v1");
        assert_eq!(
            converted[1]["spec"]["deployment"]["uninstallStrategy"],
            "RemoveWorkloads"
        );
    }

    #[test]
    fn an_object_that_does_not_convert_fails_the_review_naming_why() {
        let bad = json!({"apiVersion": "hco.kubevirt.io/v1beta1", "kind": "HyperConverged",
                         "metadata": {"name": "h", "annotations": {"hco.kubevirt.io/v1-only-fields": "["}},
                         "spec": {}});
        let answer = answer(
            &review(json!([bad]), "hco.kubevirt.io/v1"),
            api::hco::conversion::webhook,
        );
        let result = &answer["response"]["result"];
        assert_eq!(result["status"], "Failure");
        assert!(
            result["message"]
                .as_str()
                .unwrap()
                .contains("v1-only-fields annotation"),
            "{answer}"
        );
    }
}
