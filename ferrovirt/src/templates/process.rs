//! `ferrovirt process`, as `oc process`: reads a Template from the API server, sets the
//! parameters given with `-p KEY=VALUE` (refusing names the template does not declare), has
//! the server process it (`processedtemplates`) and prints its objects as a List for
//! `kubectl apply -f -`. Also the hidden `common-templates`, which prints the common templates
//! bundle as a List.

use anyhow::{Context, Result, bail};
use api::template::process::{set_parameters, to_list};
use api::template::{GROUP, PROCESSED_PLURAL, Template, VERSION};
use clap::{Args, ValueEnum};
use kube::Api;
use serde_json::{Value, json};

/// How the List is printed.
#[derive(ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Output {
    /// JSON (oc process's default).
    #[default]
    Json,
    /// YAML.
    Yaml,
}

/// `process NAME [-n NS] -p KEY=VALUE...`.
#[derive(Args, Debug)]
pub struct ProcessArgs {
    /// The Template's name.
    pub name: String,
    /// The namespace of the Template [default: the kubeconfig context's].
    #[arg(short, long)]
    pub namespace: Option<String>,
    /// A parameter value, `KEY=VALUE`; repeatable.
    #[arg(short = 'p', long = "param", value_name = "KEY=VALUE")]
    pub params: Vec<String>,
    /// Skip parameters the template does not declare instead of refusing them.
    #[arg(long)]
    pub ignore_unknown_parameters: bool,
    /// The output format.
    #[arg(short, long, value_enum, default_value_t)]
    pub output: Output,
}

/// `common-templates [-o yaml|json]`.
#[derive(Args, Debug)]
pub struct CommonTemplatesArgs {
    /// The output format.
    #[arg(short, long, value_enum, default_value_t = Output::Yaml)]
    pub output: Output,
}

/// Processes the named template on the server and prints the List of its objects.
pub async fn run(args: ProcessArgs) -> Result<()> {
    let values = parse_params(&args.name, &args.params)?;
    let (client, namespace) = crate::cluster::client_in(args.namespace.as_deref()).await?;
    let templates: Api<Template> = Api::namespaced(client.clone(), &namespace);
    let mut template = match templates.get(&args.name).await {
        Ok(template) => template,
        Err(kube::Error::Api(status)) => bail!("{}", status.message),
        Err(err) => {
            return Err(err).with_context(|| format!("reading template {namespace}/{}", args.name));
        }
    };
    set_parameters(&mut template, &values, args.ignore_unknown_parameters)?;
    let processed = process_on_server(&client, &namespace, &template).await?;
    print(&to_list(&processed), args.output)
}

/// Prints the common templates bundle as a List.
pub fn common_templates(args: CommonTemplatesArgs) -> Result<()> {
    let items = operators::install::common_templates::bundle();
    let list = json!({"kind": "List", "apiVersion": "v1", "metadata": {}, "items": items});
    print(&list, args.output)
}

/// `KEY=VALUE` pairs; a value may be empty and may hold `=`.
fn parse_params(template: &str, params: &[String]) -> Result<Vec<(String, String)>> {
    params
        .iter()
        .map(|param| match param.split_once('=') {
            Some((key, value)) if !key.is_empty() => Ok((key.to_string(), value.to_string())),
            _ => bail!("invalid parameter assignment in {template:?}: {param:?}"),
        })
        .collect()
}

/// POSTs the template to `processedtemplates` and reads back the processed Template.
async fn process_on_server(
    client: &kube::Client,
    namespace: &str,
    template: &Template,
) -> Result<Template> {
    let path = format!("/apis/{GROUP}/{VERSION}/namespaces/{namespace}/{PROCESSED_PLURAL}");
    let body = serde_json::to_vec(template).context("writing the template")?;
    let request = http::Request::builder()
        .method(http::Method::POST)
        .uri(&path)
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(body)
        .context("building the request")?;
    let name = template.metadata.name.as_deref().unwrap_or_default();
    match client.request::<Template>(request).await {
        Ok(processed) => Ok(processed),
        Err(kube::Error::Api(status)) => {
            bail!("error processing the template {name:?}: {}", status.message)
        }
        Err(err) => Err(err).with_context(|| format!("processing the template {name:?}")),
    }
}

fn print(list: &Value, output: Output) -> Result<()> {
    let text = match output {
        Output::Json => serde_json::to_string_pretty(list).context("writing JSON")? + "\n",
        Output::Yaml => serde_saphyr::to_string(list).context("writing YAML")?,
    };
    print!("{text}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn params_split_at_the_first_equals_sign() {
        let params = ["A=1".to_string(), "B=x=y".into(), "C=".into()];
        let parsed = parse_params("t", &params).unwrap();
        assert_eq!(parsed[1], ("B".into(), "x=y".into()));
        assert_eq!(parsed[2], ("C".into(), String::new()));
        let err = parse_params("t", &["NOEQUALS".into()]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid parameter assignment in \"t\": \"NOEQUALS\""
        );
        assert!(parse_params("t", &["=v".into()]).is_err());
    }
}
